/**
 * The chain runner (Hono's `compose`, without its per-call closures): each link of a chain either
 * passes to the next one through `passage.next()` or ends the attempt with its own answer. A chain
 * is composed once; a passage is one walk through it, its position kept on itself.
 */

/** One link of a chain: a gate, or the call that ends it. */
export type Link<P, R> = (passage: P) => Promise<R>;

/** A composed chain: its links in order, fixed once built. */
export interface Chain<P, R> {
  readonly links: readonly Link<P, R>[];
}

export function compose<P, R>(links: readonly Link<P, R>[]): Chain<P, R> {
  if (links.length === 0) throw new Error('a chain needs at least one link');
  return Object.freeze({ links: Object.freeze([...links]) });
}

/** One walk through a chain; subclasses carry what the links tell each other. */
export class Passage<P extends Passage<P, R>, R> {
  private at = 0;
  private readonly chain: Chain<P, R>;

  constructor(chain: Chain<P, R>) {
    this.chain = chain;
  }

  /** Runs the next link (the first, on a new passage). The last link must not pass on. */
  next(): Promise<R> {
    const link = this.chain.links[this.at++];
    if (!link) return Promise.reject(new Error('the last link of the chain passed on: nothing follows it'));
    return link(this as unknown as P);
  }
}

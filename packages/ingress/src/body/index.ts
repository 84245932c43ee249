import { IncomingMessage } from 'node:http';
import { decodeUtf8 } from '@requester/shared/contract';

/**
 * Reads a JSON request body with a hard size bound. The bound is enforced while reading: a
 * declared Content-Length above it is refused before a byte is read, and a chunked (or lying)
 * body is cut off as soon as the running total passes it, so an oversize upload never sits in
 * memory whole. With a `budget`, the bytes of bodies in flight are bounded too: each chunk is
 * taken from it as it arrives, and a body that finds it spent is cut off (the budget says with
 * which status: 503 for the instance's, 429 for a key's share). A body read whole keeps its
 * `bytes` taken: the caller gives them back when it is done with the request.
 */
export type BodyRead =
  | { ok: true; value: unknown; bytes: number }
  | { ok: false; status: 400 | 413 | 429 | 503; message: string };

/** Bytes a body may take as it is read; a refusal says why (nothing is taken then). */
export interface BodyBudget {
  take(bytes: number): true | BudgetRefusal;
  give(bytes: number): void;
}

export interface BudgetRefusal {
  status: 429 | 503;
  message: string;
}

export async function readJsonBody(
  request: Request | IncomingMessage,
  maxBytes: number,
  budget: BodyBudget = UNBOUNDED,
): Promise<BodyRead> {
  const node = request instanceof IncomingMessage;
  const declared = node ? request.headers['content-length'] : request.headers.get('content-length');
  if (declared != null && Number(declared) > maxBytes) return tooLarge(maxBytes);
  const read = node
    ? await readNodeBounded(request, maxBytes, budget)
    : await readBounded(request.body, maxBytes, budget);
  if (read === 'too_large') return tooLarge(maxBytes);
  if (!(read instanceof Uint8Array)) return { ok: false, ...read };
  const failed = (message: string): BodyRead => {
    budget?.give(read.length);
    return { ok: false, status: 400, message };
  };
  if (read.length === 0) return failed('the request body is empty; expected JSON');
  const text = decodeUtf8(read);
  if (text === undefined) return failed('the request body is not valid UTF-8');
  try {
    return { ok: true, value: JSON.parse(text), bytes: read.length };
  } catch (err) {
    return failed(`malformed JSON: ${(err as Error).message}`);
  }
}

const BUSY: BudgetRefusal = {
  status: 503,
  message: 'too many request bytes are in flight on this instance (MAX_BODY_BYTES_IN_FLIGHT); retry later',
};

/** Bytes shared by the bodies being read and handled at once. */
export class ByteBudget implements BodyBudget {
  readonly maxBytes: number;
  private left: number;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
    this.left = maxBytes;
  }

  /** Takes `bytes` when that many are left; else takes nothing. */
  take(bytes: number): true | BudgetRefusal {
    if (bytes > this.left) return BUSY;
    this.left -= bytes;
    return true;
  }

  give(bytes: number): void {
    this.left = Math.min(this.maxBytes, this.left + bytes);
  }

  /** Bytes currently taken. */
  inUse(): number {
    return this.maxBytes - this.left;
  }
}

const UNBOUNDED = new ByteBudget(Number.POSITIVE_INFINITY);

function tooLarge(maxBytes: number): BodyRead {
  return {
    ok: false,
    status: 413,
    message: `the request body is larger than the limit of ${maxBytes} bytes`,
  };
}

/**
 * The whole body (its bytes taken from `budget`), or why not as soon as it is known: past
 * `maxBytes`, or the budget spent. Then what was taken is given back and the rest is never read.
 */
async function readBounded(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
  budget: BodyBudget,
): Promise<Uint8Array | 'too_large' | BudgetRefusal> {
  if (!body) return new Uint8Array();
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  const stop = async (why: 'too_large' | BudgetRefusal) => {
    budget.give(total);
    await reader.cancel(why === 'too_large' ? why : 'busy').catch(() => {});
    return why;
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (total + value.byteLength > maxBytes) return stop('too_large');
      const taken = budget.take(value.byteLength);
      if (taken !== true) return stop(taken);
      total += value.byteLength;
      chunks.push(value);
    }
  } catch (err) {
    budget.give(total); // the client went away mid-body
    throw err;
  }
  return Buffer.concat(chunks, total);
}

/**
 * readBounded on Node's request itself (no Web stream adapted from it, see ../request). What is
 * not read stays unread: the stream is paused, not destroyed, so the answer still reaches the
 * client (the server drains or drops the rest once it is sent).
 */
function readNodeBounded(
  incoming: IncomingMessage,
  maxBytes: number,
  budget: BodyBudget,
): Promise<Uint8Array | 'too_large' | BudgetRefusal> {
  if (incoming.readableEnded) return Promise.resolve(new Uint8Array());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const settle = () => {
      incoming.off('data', onData);
      incoming.off('end', onEnd);
      incoming.off('error', onError);
      incoming.off('close', onClose);
    };
    const stop = (why: 'too_large' | BudgetRefusal) => {
      incoming.pause();
      settle();
      budget.give(total);
      resolve(why);
    };
    const onData = (chunk: Buffer) => {
      if (total + chunk.byteLength > maxBytes) return stop('too_large');
      const taken = budget.take(chunk.byteLength);
      if (taken !== true) return stop(taken);
      total += chunk.byteLength;
      chunks.push(chunk);
    };
    const onEnd = () => {
      settle();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total));
    };
    const onError = (err: unknown) => {
      settle();
      budget.give(total); // the client went away mid-body
      reject(err);
    };
    const onClose = () => onError(new Error('the request was closed before its body ended'));
    incoming.on('data', onData);
    incoming.on('end', onEnd);
    incoming.on('error', onError);
    incoming.on('close', onClose);
  });
}

/**
 * Whether a Content-Type names JSON: `application/json` or `application/<anything>+json`, with any
 * parameters. The media types a browser may send cross-site without a CORS preflight (`text/plain`,
 * forms) are not, so a web page cannot make a visitor's browser submit requests.
 */
export function isJsonMediaType(contentType: string | null | undefined): boolean {
  const essence = contentType?.split(';', 1)[0]?.trim().toLowerCase() ?? '';
  return essence === 'application/json' || /^application\/[\w.+-]+\+json$/.test(essence);
}

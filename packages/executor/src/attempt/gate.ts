import type { Attempt } from './attempt.ts';
import type { Link } from './compose.ts';
import type { PolicyModules } from './modules.ts';
import type { CallOrRefusal } from './outcome.ts';

/** How the attempt may end at a link, for the generated diagram of the executor's decisions. */
export interface Exit {
  /** What the link found, e.g. `limited`. */
  when: string;
  /** What the attempt then becomes, e.g. `wait (not an attempt)`. */
  becomes: string;
}

/**
 * A link of the attempt's chain: its name, what it does and how it may end the attempt (the
 * architecture diagram is generated from these), and its link, built once per executor.
 */
export interface GateSpec {
  name: string;
  does: string;
  exits: readonly Exit[];
  link(modules: PolicyModules): Link<Attempt, CallOrRefusal>;
}

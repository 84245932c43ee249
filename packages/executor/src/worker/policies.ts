/**
 * The worker's view of the attempt (src/attempt): the delivery policies and the names the worker
 * and its tests use. `Ending` and `Tried` are the glossary's outcome and the chain's answer.
 */
export {
  type CallOrRefusal as Tried,
  LATEST_START_MS,
  type Outcome as Ending,
  Policies,
  type PolicyModules,
  type Progress,
  paceIdentity,
} from '../attempt/index.ts';

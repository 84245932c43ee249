/** The worker's view of the attempt (src/attempt): the delivery policies, under the glossary's names. */
export {
  type CallOrRefusal,
  LATEST_START_MS,
  type Outcome,
  Policies,
  type PolicyModules,
  type Progress,
  paceIdentity,
} from '../attempt/index.ts';

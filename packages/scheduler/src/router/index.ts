/**
 * The router role (docs/architecture.md §9): `router.ts` routes a batch of `in`, with Kafka entry
 * (`entry.ts`), cancelled requests woken (`cancelled.ts`), ordered partitions' fences
 * (`fencing.ts`), spans (`trace.ts`) and the writes (`write.ts`); `role.ts` wires it from the
 * configuration.
 *
 * @module
 */

export type { KafkaEntry } from './entry.ts';
export { routerRole } from './role.ts';
export { Router, type RouterBackpressure, type RouterOptions } from './router.ts';
export type { TaskSink } from './write.ts';

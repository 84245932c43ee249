export { Relay, type RelayOptions, relayRole } from './relay/index.ts';

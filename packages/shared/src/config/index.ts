/**
 * The one configuration schema. Every setting is an environment variable (the same name is
 * documented in the README table, generated from `CONFIG_VARIABLES`); CLI flags override the
 * environment. Validation happens once at start; a bad value fails with the variable's name.
 * The variables live in `variables/<area>.ts`, their zod building blocks in `values.ts`.
 *
 * @module
 */

export { type AddressEntry, parseAddressEntry } from '../net/address.ts';
export { bodiesTopicOf, routerGroupOf } from './derived.ts';
export { loadConfig } from './load.ts';
export { redactConfigValue, SecretText } from './secret.ts';
export { configMarkdownTable } from './table.ts';
export { CONFIG_VARIABLES, type Config, type ConfigOverrides } from './variables/index.ts';

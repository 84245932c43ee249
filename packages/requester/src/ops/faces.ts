import type { Argv } from 'yargs';
import type { AdminConsole } from '../admin-server/console.ts';
import type { AdminApp, OpenApiPaths } from '../admin-server/http.ts';
import type { ConfigFrom } from '../commands/common.ts';

/**
 * The faces of an operator feature (ops/<feature>/), each optional: what the shells need of it.
 * See ./index.ts for the layout and the list they are composed from.
 */

/** `cli.ts`: registers its `requester` subcommand(s). */
export type CliFace = <T>(cli: Argv<T>, configFrom: ConfigFrom) => void;

/** `api.ts`: its routes under `/admin/api/` and their entries in `/admin/openapi.json`. */
export interface ApiFace {
  paths: OpenApiPaths;
  routes(app: AdminApp, console: AdminConsole): void;
}

/** `ui.ts`: its pages under `/ui/`, and its entry in the menu (none: reached from another page). */
export interface UiFace {
  nav?: readonly [href: string, label: string];
  routes(app: AdminApp, console: AdminConsole): void;
}

/** A feature's faces in the admin server (the `cli` faces are listed apart: ./commands.ts). */
export interface AdminFeature {
  name: string;
  api?: ApiFace;
  ui?: UiFace;
}

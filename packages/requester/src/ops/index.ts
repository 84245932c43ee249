import { api as breakersApi } from './breakers/api.ts';
import { registerBreakersCommands } from './breakers/cli.ts';
import { ui as breakersUi } from './breakers/ui.ts';
import { api as cancelApi } from './cancel/api.ts';
import { registerCancelCommand } from './cancel/cli.ts';
import { api as clientsApi } from './clients/api.ts';
import { ui as clientsUi } from './clients/ui.ts';
import { api as credentialsApi } from './credentials/api.ts';
import { registerCredentialsCommands } from './credentials/cli.ts';
import { ui as credentialsUi } from './credentials/ui.ts';
import { api as dlqApi } from './dlq/api.ts';
import { registerDlqCommands } from './dlq/cli.ts';
import { ui as dlqUi } from './dlq/ui.ts';
import type { AdminFeature } from './faces.ts';
import { api as keysApi } from './keys/api.ts';
import { registerKeysCommands } from './keys/cli.ts';
import { ui as keysUi } from './keys/ui.ts';
import { api as limiterApi } from './limiter/api.ts';
import { registerLimiterCommands } from './limiter/cli.ts';
import { ui as limiterUi } from './limiter/ui.ts';
import { api as originsApi } from './origins/api.ts';
import { registerOriginsCommands } from './origins/cli.ts';
import { ui as originsUi } from './origins/ui.ts';
import { registerOutboxCommands } from './outbox/cli.ts';
import { api as overviewApi } from './overview/api.ts';
import { ui as overviewUi } from './overview/ui.ts';
import { api as pauseApi } from './pause/api.ts';
import { registerPauseCommands } from './pause/cli.ts';
import { ui as pauseUi } from './pause/ui.ts';
import { api as queueApi } from './queue/api.ts';
import { registerQueueCommands } from './queue/cli.ts';
import { ui as queueUi } from './queue/ui.ts';
import { api as requestsApi } from './requests/api.ts';
import { ui as requestsUi } from './requests/ui.ts';
import { api as tasksApi } from './tasks/api.ts';
import { registerTasksCommands } from './tasks/cli.ts';
import { ui as tasksUi } from './tasks/ui.ts';
import { registerTraceCommand } from './trace/cli.ts';

/**
 * The operator's features, each a folder: the operation once (`index.ts`, over the clients it is
 * given) and its faces beside it — `cli.ts` (a `requester` subcommand), `api.ts` (routes of the
 * admin API, `/admin/api/…`, and their OpenAPI entries), `ui.ts` (pages of the operator UI,
 * `/ui/…`). Each face renders the same view: a table, JSON, HTML. Views of requests hide their
 * secrets (./redact.ts) unless asked to reveal them, which is recorded as an operator action
 * (./audit.ts).
 *
 * This list is the one the shells compose: the CLI registers the `cli` faces
 * (commands/index.ts), the admin server the `api` and `ui` faces (admin-server/app.ts), its
 * OpenAPI document the `api` faces' paths (admin-server/openapi.ts), the UI's menu the `ui`
 * faces' `nav`. The order is theirs: commands in `requester --help`, paths in
 * `/admin/openapi.json`, the menu.
 */
export const ADMIN_FEATURES: readonly AdminFeature[] = [
  { name: 'overview', api: overviewApi, ui: overviewUi },
  { name: 'queue', cli: registerQueueCommands, api: queueApi, ui: queueUi },
  { name: 'requests', api: requestsApi, ui: requestsUi },
  { name: 'dlq', cli: registerDlqCommands, api: dlqApi, ui: dlqUi },
  { name: 'clients', api: clientsApi, ui: clientsUi },
  { name: 'keys', cli: registerKeysCommands, api: keysApi, ui: keysUi },
  { name: 'credentials', cli: registerCredentialsCommands, api: credentialsApi, ui: credentialsUi },
  { name: 'trace', cli: registerTraceCommand },
  { name: 'cancel', cli: registerCancelCommand, api: cancelApi },
  { name: 'pause', cli: registerPauseCommands, api: pauseApi, ui: pauseUi },
  { name: 'tasks', cli: registerTasksCommands, api: tasksApi, ui: tasksUi },
  { name: 'origins', cli: registerOriginsCommands, api: originsApi, ui: originsUi },
  { name: 'breakers', cli: registerBreakersCommands, api: breakersApi, ui: breakersUi },
  { name: 'outbox', cli: registerOutboxCommands },
  { name: 'limiter', cli: registerLimiterCommands, api: limiterApi, ui: limiterUi },
];

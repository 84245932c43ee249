import { api as breakersApi } from './breakers/api.ts';
import { ui as breakersUi } from './breakers/ui.ts';
import { api as cancelApi } from './cancel/api.ts';
import { api as clientsApi } from './clients/api.ts';
import { ui as clientsUi } from './clients/ui.ts';
import { api as credentialsApi } from './credentials/api.ts';
import { ui as credentialsUi } from './credentials/ui.ts';
import { api as destinationsApi } from './destinations/api.ts';
import { ui as destinationsUi } from './destinations/ui.ts';
import { api as dlqApi } from './dlq/api.ts';
import { ui as dlqUi } from './dlq/ui.ts';
import type { AdminFeature } from './faces.ts';
import { api as keysApi } from './keys/api.ts';
import { ui as keysUi } from './keys/ui.ts';
import { api as limiterApi } from './limiter/api.ts';
import { ui as limiterUi } from './limiter/ui.ts';
import { api as originsApi } from './origins/api.ts';
import { ui as originsUi } from './origins/ui.ts';
import { api as overviewApi } from './overview/api.ts';
import { ui as overviewUi } from './overview/ui.ts';
import { api as pauseApi } from './pause/api.ts';
import { ui as pauseUi } from './pause/ui.ts';
import { api as queueApi } from './queue/api.ts';
import { ui as queueUi } from './queue/ui.ts';
import { api as requestsApi } from './requests/api.ts';
import { ui as requestsUi } from './requests/ui.ts';
import { api as tasksApi } from './tasks/api.ts';
import { ui as tasksUi } from './tasks/ui.ts';

/**
 * The operator's features, each a folder: the operation once (`index.ts`, over the clients it is
 * given) and its faces beside it — `cli.ts` (its `requester` subcommands, run by `run.ts`), `api.ts` (routes of the
 * admin API, `/admin/api/…`, and their OpenAPI entries), `ui.ts` (pages of the operator UI,
 * `/ui/…`). Each face renders the same view: a table, JSON, HTML. Views of requests hide their
 * secrets (./redact.ts) unless asked to reveal them, which is recorded as an operator action
 * (./audit.ts).
 *
 * This list is the one the admin server composes: the `api` and `ui` faces (admin-server/app.ts),
 * its OpenAPI document the `api` faces' paths (admin-server/openapi.ts), the UI's menu the `ui`
 * faces' `nav`. The order is theirs: paths in `/admin/openapi.json`, the menu. The `cli` faces
 * are listed apart, in ./commands.ts, so that the CLI loads none of the others.
 */
export const ADMIN_FEATURES: readonly AdminFeature[] = [
  { name: 'overview', api: overviewApi, ui: overviewUi },
  { name: 'queue', api: queueApi, ui: queueUi },
  { name: 'requests', api: requestsApi, ui: requestsUi },
  { name: 'dlq', api: dlqApi, ui: dlqUi },
  { name: 'clients', api: clientsApi, ui: clientsUi },
  { name: 'keys', api: keysApi, ui: keysUi },
  { name: 'credentials', api: credentialsApi, ui: credentialsUi },
  { name: 'destinations', api: destinationsApi, ui: destinationsUi },
  { name: 'cancel', api: cancelApi },
  { name: 'pause', api: pauseApi, ui: pauseUi },
  { name: 'tasks', api: tasksApi, ui: tasksUi },
  { name: 'origins', api: originsApi, ui: originsUi },
  { name: 'breakers', api: breakersApi, ui: breakersUi },
  { name: 'limiter', api: limiterApi, ui: limiterUi },
];

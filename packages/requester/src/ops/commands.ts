import { registerBreakersCommands } from './breakers/cli.ts';
import { registerCancelCommand } from './cancel/cli.ts';
import { registerCredentialsCommands } from './credentials/cli.ts';
import { registerDestinationsCommands } from './destinations/cli.ts';
import { registerDlqCommands } from './dlq/cli.ts';
import type { CliFace } from './faces.ts';
import { registerKeysCommands } from './keys/cli.ts';
import { registerLimiterCommands } from './limiter/cli.ts';
import { registerOriginsCommands } from './origins/cli.ts';
import { registerOutboxCommands } from './outbox/cli.ts';
import { registerPauseCommands } from './pause/cli.ts';
import { registerQueueCommands } from './queue/cli.ts';
import { registerTasksCommands } from './tasks/cli.ts';
import { registerTraceCommand } from './trace/cli.ts';

/**
 * The `cli` faces of the operator's features (./index.ts), in the order of `requester --help`;
 * the CLI registers them (commands/index.ts). Apart from ADMIN_FEATURES, whose `api` and `ui`
 * faces load the admin server and the clients, so that parsing a command line loads only the
 * commands' definitions: each `cli.ts` defines its commands (what --help prints) and imports its
 * `run.ts`, the implementation, when one of them runs.
 */
export const ADMIN_COMMANDS: readonly CliFace[] = [
  registerQueueCommands,
  registerDlqCommands,
  registerKeysCommands,
  registerCredentialsCommands,
  registerDestinationsCommands,
  registerTraceCommand,
  registerCancelCommand,
  registerPauseCommands,
  registerTasksCommands,
  registerOriginsCommands,
  registerBreakersCommands,
  registerOutboxCommands,
  registerLimiterCommands,
];

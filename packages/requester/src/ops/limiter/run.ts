import type { LimiterWindowState } from '@requester/policies';
import { commandLogger, commandRedis } from '../../commands/clients.ts';
import { type ConfigFrom, printJson, printTable } from '../../commands/common.ts';
import { humanSpan, humanTime } from '../format.ts';
import { quotaArg, rateArg, showLimiter, spanOf } from './index.ts';

interface LimiterArgs {
  key: string;
  client?: string;
  rate?: string[];
  apiKey: boolean;
  quota?: string | number;
  json: boolean;
}

/** `requester limiter`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function show(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  const args = argv as unknown as LimiterArgs;
  const rates = (args.rate ?? []).map(String).map(rateArg);
  const config = configFrom(argv);
  const redis = commandRedis(config, commandLogger(config));
  try {
    const client = args.client === undefined ? undefined : String(args.client);
    const quota = args.quota === undefined ? undefined : quotaArg(String(args.quota));
    const { windows, views } = await showLimiter(
      redis,
      config,
      String(args.key),
      rates,
      args.apiKey,
      client,
      quota,
    );
    if (args.json) printJson(views);
    else print(windows);
  } finally {
    redis.disconnect();
  }
}

function print(windows: LimiterWindowState[]): void {
  printTable(
    windows.map((w) => ({
      algorithm: w.algorithm,
      window: spanOf(w, humanSpan),
      value: w.value,
      used: w.used,
      remaining: w.remaining,
      reset: humanTime(w.resetAtMs),
    })),
  );
}

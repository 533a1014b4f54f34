/**
 * The field usage of an app, built from its configuration (`USAGE_*`, and Redis when the facade
 * has one), and `GET /usage` on the metrics port (never the public one): the usage of the last days
 * as JSON, which an operator downloads and hands to CI (`npm run schema:check -- --usage <days>
 * --usage-file <file>`), so CI needs no access to the production Redis.
 */
import type { RequestHandler } from 'express';
import type { Caller } from '../auth/caller.ts';
import type { Logger } from '../logger.ts';
import { openRedisConnection } from '../redis.ts';
import type { RedisConfig } from '../redis-config.ts';
import { createUsageRecorder, type UsageConfig, type UsageRecorder } from './usage-recorder.ts';
import { createMemoryUsageStore, createRedisUsageStore, type UsageReader } from './usage-store.ts';

/** Where `GET /usage` is served on the metrics port. */
export const USAGE_PATH = '/usage';

/** The field usage of one app: what counts operations, and what reads the days back. */
export interface FieldUsage {
  readonly recorder: UsageRecorder;
  readonly reader: UsageReader;
  /** Flushes what is counted, then closes the store's connection. */
  close(): Promise<void>;
}

/** The field usage of `config`: in Redis (shared by every replica) when there is one, else in memory. */
export function createFieldUsage(
  config: UsageConfig,
  parts: {
    redis: RedisConfig | undefined;
    redisKeyPrefix: string;
    contractOf: (caller: Caller | undefined) => string | undefined;
    logger: Logger;
  },
): FieldUsage {
  const logger = parts.logger.child({ component: 'field-usage' });
  const bounds = { days: config.days, maxOperations: config.maxOperations };
  const store =
    parts.redis === undefined || !config.enabled
      ? createMemoryUsageStore(bounds)
      : createRedisUsageStore({
          ...bounds,
          redis: openRedisConnection(parts.redis, 'field-usage', logger),
          prefix: parts.redisKeyPrefix,
          ownsConnection: true,
        });
  const recorder = createUsageRecorder({ config, store, contractOf: parts.contractOf, logger });
  return {
    recorder,
    reader: store,
    async close() {
      await recorder.close();
      await store.close();
    },
  };
}

/**
 * The handler of {@link USAGE_PATH}: `?days=` (1 to `USAGE_DAYS`, default `USAGE_DAYS`) days of
 * usage up to today, as the store holds them (every replica's with Redis); 400 for another `days`,
 * 503 when the store cannot be read (Redis away). Never cached.
 */
export function usageListing(
  reader: UsageReader,
  maxDays: number,
  now: () => number = Date.now,
): RequestHandler {
  return (request, response) => {
    response.setHeader('Cache-Control', 'no-store');
    const given = request.query.days;
    const days = given === undefined ? maxDays : typeof given === 'string' ? Number(given) : Number.NaN;
    if (!Number.isInteger(days) || days < 1 || days > maxDays) {
      response.status(400).json({ error: `days must be a whole number from 1 to ${maxDays} (USAGE_DAYS)` });
      return;
    }
    reader.read(days, now()).then(
      (report) => response.status(200).json(report),
      () => response.status(503).json({ error: 'the field usage cannot be read now' }),
    );
  };
}

/**
 * One way of opening a Redis connection (the event pipeline, the rate limits, the invalidations), so
 * that every one finds the primary the same way (one URL, or through the Sentinels), logs its
 * errors instead of crashing the process and never logs its URL or a password; and the one way of
 * asking whether the replicas hold what a connection wrote (`WAIT`).
 */
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from './logger.ts';
import type { RedisConfig, ReplicaAckPolicy } from './redis-config.ts';

/**
 * The options every connection shares.
 *
 * - Commands fail after a few reconnection attempts rather than queueing for ever, so a webhook
 *   whose publication cannot reach Redis is refused within the upstream's 5 s and retried later.
 * - A command sent on a connection that dropped before its answer is sent again on the next one
 *   (ioredis's default; turned off, it leaves such commands unanswered for ever). Writes that must
 *   not happen twice are written so that a second run changes nothing (the append checks its
 *   claim), and a `WAIT` sent again alone, on a connection that never saw the writes it was asked
 *   about, is not believed ({@link replicaAcksOf}).
 * - A node that answers READONLY has become a replica (a failover): reconnect, which finds the
 *   primary again through the Sentinels.
 */
function sharedOptions(role: string): RedisOptions {
  return {
    maxRetriesPerRequest: 2,
    connectionName: `facade-${role}`,
    reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 1 : false),
  };
}

/**
 * Opens an ioredis 5 connection to `redis` (a {@link RedisConfig}, or a plain URL in tests and
 * benchmarks) whose errors are logged instead of crashing the process. With Sentinels, it asks them
 * for the primary at every (re)connection, checks the node answers as one, and also reconnects as
 * soon as they announce a failover. Neither the URL nor a password is ever logged.
 */
export function openRedisConnection(redis: RedisConfig | string, role: string, logger: Logger): Redis {
  const connection = typeof redis === 'string' ? new Redis(redis, sharedOptions(role)) : open(redis, role);
  let lastLogged = 0;
  let attemptAbandoned = false;
  connection.on('error', (error: Error) => {
    if (error.message === CONNECTION_CLOSED && connection.status === 'connecting') attemptAbandoned = true;
    // ioredis emits an error per reconnection attempt; one line every few seconds is enough.
    if (Date.now() - lastLogged < 5000) return;
    lastLogged = Date.now();
    logger.error('redis connection error', { role, error: error.message });
  });
  let lastReopenLogged = 0;
  connection.on('end', () => {
    if (!attemptAbandoned) return;
    attemptAbandoned = false;
    // Once a failover; should it repeat at every attempt, one line every few seconds.
    if (Date.now() - lastReopenLogged >= 5000) {
      lastReopenLogged = Date.now();
      logger.warn('redis connection given up by its client during a failover; connecting again', { role });
    }
    setTimeout(() => {
      if (connection.status === 'end' && !closedByItsOwner(connection))
        connection.connect().catch(() => undefined);
    }, RECONNECT_AFTER_ABANDON_MS).unref();
  });
  return connection;
}

/**
 * ioredis 5 gives a Sentinel connection up for good (status `end`, no more reconnection attempts)
 * when its failover detector hears `+switch-master` while the connection is between attempts,
 * asking a Sentinel for the primary: the attempt fails with "Connection is closed." as if its owner
 * had closed it. A failover then left the rate limits in memory, or the event log unreachable,
 * until the process restarted. Such an attempt is the only way this error reaches an 'error'
 * listener while the status is `connecting` (a close by the owner silences it), and the connection
 * is opened again after a short pause.
 */
const CONNECTION_CLOSED = 'Connection is closed.';
const RECONNECT_AFTER_ABANDON_MS = 100;

/** Whether `disconnect()` or `quit()` was called on `connection` (ioredis keeps that in a private field). */
function closedByItsOwner(connection: Redis): boolean {
  return (connection as unknown as { manuallyClosing?: boolean }).manuallyClosing === true;
}

function open(config: RedisConfig, role: string): Redis {
  const password = config.password === undefined ? {} : { password: config.password };
  if ('url' in config.target) return new Redis(config.target.url, { ...sharedOptions(role), ...password });
  return new Redis({
    ...sharedOptions(role),
    ...password,
    sentinels: config.target.sentinels.map(({ host, port }) => ({ host, port })),
    name: config.target.masterName,
    role: 'master',
    ...(config.sentinelPassword === undefined ? {} : { sentinelPassword: config.sentinelPassword }),
    // Subscribed to the Sentinels' +switch-master: a primary cut off without a reset connection
    // (a partition) is left at once, not when a command times out.
    failoverDetector: true,
  });
}

/**
 * Closes a connection opened by {@link openRedisConnection}: QUIT (answers still due arrive first),
 * then a disconnect, which also ends the connections to the Sentinels that watch for a failover
 * (ioredis leaves them open, reconnecting, after a QUIT alone).
 */
export async function closeRedisConnection(connection: Redis): Promise<void> {
  await connection.quit().catch(() => undefined);
  connection.disconnect();
}

/** How long a start waits for Redis before going on without it (Redis may come later, or never). */
const REDIS_READY_WAIT_MS = 2_000;

/** Resolves once `redis` is ready, or after `timeoutMs`: a Redis that is down does not stop the start. */
export async function whenRedisReady(redis: Redis, timeoutMs = REDIS_READY_WAIT_MS): Promise<void> {
  if (redis.status === 'ready') return;
  // Not events.once: it rejects on the 'error' events an unreachable Redis emits.
  await new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      redis.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    redis.once('ready', done);
  });
}

/** Whether the replicas hold what one connection wrote (see {@link replicaAcksOf}). */
export interface ReplicaAcks {
  /** The policy asked for; `replicas: 0` answers true at once. */
  readonly policy: ReplicaAckPolicy;
  /**
   * Whether at least `policy.replicas` replicas hold every write this connection made before the
   * call. Call it in the same turn of the event loop as the answer to the caller's last write (no
   * timer or I/O between): that pins the connection the write was made on, and a `WAIT` that ran on
   * another (after a reconnection) answers false rather than for writes it never saw.
   */
  held(): Promise<boolean>;
}

/**
 * The acknowledgements of `connection`'s writes by its replicas: `WAIT <replicas> <timeoutMs>`,
 * one for every caller of the same turn (a group commit: while a `WAIT` blocks the connection,
 * writes queue behind it and share the next one). False when fewer replicas answered in time, the
 * connection changed, or `WAIT` failed.
 */
export function replicaAcksOf(connection: Redis, policy: ReplicaAckPolicy): ReplicaAcks {
  let connections = 0;
  connection.on('close', () => (connections += 1));
  let next: Promise<number> | undefined;
  const nextWait = (): Promise<number> => {
    // Sent once the callers of this turn have asked: a write answered later needs the next one.
    next ??= Promise.resolve().then(() => {
      next = undefined;
      return connection.call('WAIT', policy.replicas, policy.timeoutMs).then(Number, () => -1);
    });
    return next;
  };
  return {
    policy,
    async held() {
      if (policy.replicas === 0) return true;
      const on = connections;
      const acknowledged = await nextWait();
      return acknowledged >= policy.replicas && on === connections;
    },
  };
}

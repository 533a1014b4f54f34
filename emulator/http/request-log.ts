/** One `/v3` request as `GET /_emulator/requests` shows it. */
export type RequestLogEntry = {
  method: string;
  /** `METHOD /path/{template}`, or `METHOD (unmatched)` for a path outside the contract. */
  route: string;
  path: string;
  /** Null until the response is sent (and forever for stalled or reset requests). */
  status: number | null;
  requestId: string;
};

export type RequestLogSnapshot = {
  total: number;
  byRoute: Record<string, number>;
  /** The most recent requests, oldest first. */
  requests: RequestLogEntry[];
};

/** Counts `/v3` requests by route, so tests and benchmarks can assert exact upstream call counts. */
export type RequestLog = {
  record(entry: Omit<RequestLogEntry, 'status'>): RequestLogEntry;
  /** Counts one request whose key the emulator accepted, by the key's identity id. */
  countKey(keyId: string): void;
  /**
   * Requests whose key was accepted since the last reset, by the key's identity id
   * (`sandbox-read-write`; never the key): which key, and so which environment, a client used.
   */
  byKeyId(): Record<string, number>;
  snapshot(): RequestLogSnapshot;
  clear(): void;
};

/** Keeps exact counts forever and the details of the last `keep` requests (so benchmarks stay flat). */
export function createRequestLog(keep = 1000): RequestLog {
  let total = 0;
  let byRoute = new Map<string, number>();
  let byKeyId = new Map<string, number>();
  let recent: RequestLogEntry[] = [];

  return {
    record(input) {
      const entry: RequestLogEntry = { ...input, status: null };
      total++;
      byRoute.set(entry.route, (byRoute.get(entry.route) ?? 0) + 1);
      recent.push(entry);
      // Trim in batches: shifting one element per request would make each request O(keep).
      if (recent.length >= keep * 2) recent = recent.slice(-keep);
      return entry;
    },
    countKey(keyId) {
      byKeyId.set(keyId, (byKeyId.get(keyId) ?? 0) + 1);
    },
    byKeyId: () => Object.fromEntries(byKeyId),
    snapshot() {
      return {
        total,
        byRoute: Object.fromEntries(byRoute),
        requests: recent.slice(-keep).map((entry) => ({ ...entry })),
      };
    },
    clear() {
      total = 0;
      byRoute = new Map();
      byKeyId = new Map();
      recent = [];
    },
  };
}

/** Reads a positive integer option of a benchmark from the environment, or its default. */
export function positiveIntegerFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`${name} must be a positive integer; got "${raw}".`);
  return value;
}

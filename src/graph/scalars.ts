/**
 * The schema's two custom scalars. Both are strings on the wire and in resolvers; what they add is
 * validation at the edge, so a bad timestamp or a float amount is refused with a clear message
 * before any upstream call is made.
 */
import { GraphQLError, GraphQLScalarType, Kind, type ValueNode } from 'graphql';
import { isRfc3339DateTime } from '../rfc3339.ts';

/** Decimal digits with an optional sign and fraction; no exponent, no grouping, no float. */
const DECIMAL = /^-?\d+(\.\d+)?$/;

/** Longer values are refused rather than passed upstream: no amount of money needs them. */
export const MAX_DECIMAL_LENGTH = 40;

/** The pattern a `Decimal` string matches (an MCP tool's input schema states it). */
export const DECIMAL_PATTERN = DECIMAL.source;

/** Whether `value` is a decimal money string the schema accepts. */
export function isDecimalString(value: string): boolean {
  return value.length <= MAX_DECIMAL_LENGTH && DECIMAL.test(value);
}

function badInput(message: string, node?: ValueNode): GraphQLError {
  return new GraphQLError(message, {
    ...(node ? { nodes: node } : {}),
    extensions: { code: 'BAD_USER_INPUT' },
  });
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

function parseDateTime(value: unknown, node?: ValueNode): string {
  if (typeof value !== 'string' || !isRfc3339DateTime(value)) {
    throw badInput(
      `DateTime must be an RFC 3339 date-time with a time zone offset, such as "2026-11-22T09:30:00Z"; got ${describe(value)}.`,
      node,
    );
  }
  return value;
}

function parseDecimal(value: unknown, node?: ValueNode): string {
  if (typeof value === 'number') {
    throw badInput(
      `Decimal must be a string such as "12.50", not a number, so that no precision is lost; got ${value}.`,
      node,
    );
  }
  if (typeof value !== 'string' || !isDecimalString(value)) {
    throw badInput(
      `Decimal must be a decimal string such as "12.50" (digits, an optional leading minus and an optional fraction, at most ${MAX_DECIMAL_LENGTH} characters); got ${describe(value)}.`,
      node,
    );
  }
  return value;
}

/** RFC 3339 timestamps, passed through unchanged so no precision or offset is lost. */
export const DateTimeScalar = new GraphQLScalarType<string, string>({
  name: 'DateTime',
  description: 'An instant in time as an RFC 3339 string with a time zone offset.',
  specifiedByURL: 'https://datatracker.ietf.org/doc/html/rfc3339#section-5.6',
  serialize(value) {
    if (value instanceof Date) return value.toISOString();
    if (typeof value === 'string' && isRfc3339DateTime(value)) return value;
    throw new GraphQLError(`DateTime cannot represent ${describe(value)}: not an RFC 3339 date-time.`);
  },
  parseValue: (value) => parseDateTime(value),
  parseLiteral(node) {
    if (node.kind !== Kind.STRING) throw badInput('DateTime must be written as a string literal.', node);
    return parseDateTime(node.value, node);
  },
});

/** Decimal money strings: floats never enter or leave the facade. */
export const DecimalScalar = new GraphQLScalarType<string, string>({
  name: 'Decimal',
  description: 'A decimal amount of money in major units, as a string (never a float).',
  serialize(value) {
    if (typeof value === 'string' && isDecimalString(value)) return value;
    throw new GraphQLError(`Decimal cannot represent ${describe(value)}: not a decimal string.`);
  },
  parseValue: (value) => parseDecimal(value),
  parseLiteral(node) {
    if (node.kind === Kind.INT || node.kind === Kind.FLOAT) return parseDecimal(Number(node.value), node);
    if (node.kind !== Kind.STRING)
      throw badInput('Decimal must be written as a string literal, e.g. "12.50".', node);
    return parseDecimal(node.value, node);
  },
});

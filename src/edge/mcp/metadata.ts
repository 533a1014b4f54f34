/**
 * The MCP endpoint as an OAuth 2.0 protected resource (RFC 9728, as MCP's authorization asks): its
 * metadata names the issuer whose access tokens it takes (`AUTH_ISSUER`, the same tokens HTTP
 * takes, verified the same way), and every 401 points at that metadata in `WWW-Authenticate`
 * (`resource_metadata`), so a client that holds no token, or an expired one, learns where to get
 * one. Served at `/.well-known/oauth-protected-resource/mcp` (the resource's path inserted, as RFC
 * 9728 builds it) and at `/.well-known/oauth-protected-resource` (where MCP clients look next).
 */
import type { Request, RequestHandler } from 'express';
import { MCP_PATH } from './rules.ts';

/** Where the metadata is served: the well-known prefix, and it followed by the resource's path. */
export const PROTECTED_RESOURCE_PATHS = [
  '/.well-known/oauth-protected-resource',
  `/.well-known/oauth-protected-resource${MCP_PATH}`,
] as const;

/** What the metadata is made from. */
export interface ProtectedResourceOptions {
  /** `AUTH_ISSUER`; undefined when callers present no tokens (then there is no metadata to serve). */
  readonly issuer: string | undefined;
  /** `MCP_RESOURCE_URL`; undefined: the request's own scheme and host. */
  readonly resourceUrl: string | undefined;
  /** `TRUST_PROXY`: with a proxy in front, its `X-Forwarded-Proto` says the scheme clients use. */
  readonly trustProxy: number;
}

/** The protected resource of one app: its identifier per request, its metadata, its challenge. */
export interface ProtectedResource {
  /** Serves the metadata (404 when there is no issuer). */
  readonly handler: RequestHandler;
  /** `WWW-Authenticate` of a 401, with `resource_metadata` added when there is metadata. */
  challenge(req: Request, given: string | undefined): string | undefined;
}

export function createProtectedResource(options: ProtectedResourceOptions): ProtectedResource {
  const resourceOf = (req: Request): string =>
    options.resourceUrl ?? `${schemeOf(req, options.trustProxy)}://${hostOf(req)}${MCP_PATH}`;
  const metadataUrlOf = (req: Request): string => {
    const resource = new URL(resourceOf(req));
    return `${resource.origin}/.well-known/oauth-protected-resource${resource.pathname.replace(/\/+$/, '')}`;
  };
  return {
    handler(req, res) {
      if (options.issuer === undefined) {
        res
          .status(404)
          .json({ error: 'not_found', error_description: 'This facade takes no OAuth access tokens.' });
        return;
      }
      // Public, and read by browser clients of other origins before they hold any credential.
      res.set({ 'access-control-allow-origin': '*', 'cache-control': 'public, max-age=3600' }).json({
        resource: resourceOf(req),
        authorization_servers: [options.issuer],
        bearer_methods_supported: ['header'],
        resource_name: 'Customer and Account Platform (GraphQL facade) MCP server',
      });
    },
    challenge(req, given) {
      if (options.issuer === undefined || given === undefined) return given;
      return `${given}${given.trim() === 'Bearer' ? ' ' : ', '}resource_metadata="${metadataUrlOf(req)}"`;
    },
  };
}

/** The scheme clients use: `https` when a believed proxy says so, else the facade's own `http`. */
function schemeOf(req: Request, trustProxy: number): 'http' | 'https' {
  if (trustProxy === 0) return 'http';
  const forwarded = req.get('x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase();
  return forwarded === 'https' ? 'https' : 'http';
}

/** The request's `Host` when it is a plain host name or address (it is quoted into a header). */
function hostOf(req: Request): string {
  const host = req.get('host');
  return host !== undefined && /^[A-Za-z0-9.:[\]-]{1,255}$/.test(host) ? host : 'localhost';
}

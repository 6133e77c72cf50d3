// A real OpenID provider for kubedav's tests: panva's oidc-provider (npm), with a login
// page of its own that checks passwords against an accounts file the test writes.
//
//   node idp.mjs genkey KID            prints a new RS256 private JWK
//   node idp.mjs                       serves, configured by the environment:
//     IDP_PORT           the port on 127.0.0.1 (the issuer is http://127.0.0.1:PORT)
//     IDP_KEYS           a JSON file: {"keys": [private JWKs]}; the first signs
//     IDP_ACCOUNTS       a JSON file: {"accounts": [{login, password, sub, name, groups,
//                        disabled}]}, read at every login and every account lookup, so a
//                        test disables an account by rewriting it
//     IDP_REDIRECT_URIS  the kubedav client's redirect URIs, comma-separated
//     IDP_AUDIENCE       the audience of the access tokens (JWTs), default "kubedav"
//     IDP_TOKEN_TTL      seconds an access token lives, default 300
//
// Clients: "kubedav" (confidential, secret "kubedav-secret": the file manager's sign-in)
// and "cli" (public, PKCE, redirect http://127.0.0.1/callback: scripts get tokens).
// Access tokens are JWTs for IDP_AUDIENCE, with the user's groups and name in them.
// Prints "listening on ISSUER" once it serves.
import http from 'node:http';
import fs from 'node:fs';
import crypto from 'node:crypto';
import { generateKeyPair, exportJWK } from 'jose';
import Provider from 'oidc-provider';

if (process.argv[2] === 'genkey') {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  console.log(JSON.stringify({ ...jwk, kid: process.argv[3] || crypto.randomUUID(), alg: 'RS256', use: 'sig' }));
  process.exit(0);
}

const port = Number(process.env.IDP_PORT);
const issuer = `http://127.0.0.1:${port}`;
const audience = process.env.IDP_AUDIENCE || 'kubedav';
const tokenTtl = Number(process.env.IDP_TOKEN_TTL || 300);
// The resource indicator the tokens are for (an absolute URI, as RFC 8707 asks).
const resource = 'urn:kubedav:files';
const keys = JSON.parse(fs.readFileSync(process.env.IDP_KEYS, 'utf8')).keys;
const accounts = () => JSON.parse(fs.readFileSync(process.env.IDP_ACCOUNTS, 'utf8')).accounts;
const bySub = (sub) => accounts().find((a) => a.sub === sub && !a.disabled);
const redirects = (process.env.IDP_REDIRECT_URIS || '').split(',').filter(Boolean);

const claimsOf = (account) => ({
  sub: account.sub,
  name: account.name,
  preferred_username: account.login,
  groups: account.groups || [],
});

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'kubedav',
      client_secret: 'kubedav-secret',
      redirect_uris: redirects.length ? redirects : ['http://127.0.0.1/unused'],
      post_logout_redirect_uris: redirects.map((r) => new URL('/', r).href),
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
    {
      client_id: 'cli',
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
  ],
  jwks: { keys },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', 'profile', 'groups'],
  claims: { openid: ['sub'], profile: ['name', 'preferred_username'], groups: ['groups'] },
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: 'openid profile groups offline_access',
        audience,
        accessTokenFormat: 'jwt',
        accessTokenTTL: tokenTtl,
      }),
    },
  },
  extraTokenClaims: async (ctx, token) => {
    const account = token.accountId && bySub(token.accountId);
    return account ? { groups: account.groups || [], name: account.name, preferred_username: account.login } : {};
  },
  findAccount: async (ctx, sub) => {
    const account = bySub(sub);
    if (!account) return undefined;
    return { accountId: sub, claims: async () => claimsOf(account) };
  },
  // First-party clients: every scope and claim asked for is granted without a consent page.
  loadExistingGrant: async (ctx) => {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid offline_access profile groups');
    grant.addOIDCClaims(['sub', 'name', 'preferred_username', 'groups']);
    grant.addResourceScope(resource, 'openid profile groups offline_access');
    await grant.save();
    return grant;
  },
  // As Keycloak and Dex do for `offline_access`: a refresh token that outlives the
  // browser's session at the provider, without a consent prompt (oidc-provider itself
  // grants offline_access only with prompt=consent).
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  expiresWithSession: async () => false,
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: { AccessToken: tokenTtl, IdToken: 300, Session: 3600, Interaction: 600, Grant: 3600, RefreshToken: 86400 },
  renderError: async (ctx, out) => {
    ctx.type = 'text/plain';
    ctx.body = `${out.error}: ${out.error_description || ''}\n`;
  },
});
// The client talks to it over plain HTTP on loopback.
provider.proxy = true;

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function loginPage(res, uid, problem) {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(`<!doctype html><html><head><title>Sign in to the test IdP</title></head><body>
<h1>Test IdP</h1>${problem ? `<p id="problem">${escape(problem)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
<label>User <input id="username" name="login" autofocus></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="sign-in" type="submit">Sign in</button></form></body></html>`);
}

async function body(req) {
  let text = '';
  for await (const chunk of req) {
    text += chunk;
    if (text.length > 65536) throw new Error('too large');
  }
  return new URLSearchParams(text);
}

async function interaction(req, res) {
  const [, , uid, action] = new URL(req.url, issuer).pathname.split('/');
  try {
    const details = await provider.interactionDetails(req, res);
    if (req.method === 'GET') {
      if (details.prompt.name === 'login') return loginPage(res, uid);
      // consent: granted by loadExistingGrant; finish with what it made
      const grantId = details.grantId || (await provider.Grant.find(details.session?.accountId) && undefined);
      return provider.interactionFinished(req, res, { consent: grantId ? { grantId } : {} }, { mergeWithLastSubmission: true });
    }
    if (req.method === 'POST' && action === 'login') {
      const form = await body(req);
      const account = accounts().find((a) => a.login === form.get('login'));
      if (!account || account.password !== form.get('password') || account.disabled) {
        return loginPage(res, uid, 'Wrong user name or password.');
      }
      return provider.interactionFinished(req, res, { login: { accountId: account.sub } }, { mergeWithLastSubmission: false });
    }
    res.writeHead(405).end();
  } catch (error) {
    res.writeHead(400, { 'content-type': 'text/plain' });
    res.end(`interaction failed: ${error.message}\n`);
  }
}

const callback = provider.callback();
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) return interaction(req, res);
  return callback(req, res);
});
server.listen(port, '127.0.0.1', () => console.log(`listening on ${issuer}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));

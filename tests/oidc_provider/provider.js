// A real OpenID Connect provider on loopback for the sign-in tests: node's `oidc-provider`
// (installed by `make oidc-provider`), one confidential client, PKCE required, an RS256 key
// made at start, and a small sign-in form of its own (no consent screen: the site is the
// organisation's own client, as it is at a real provider).
//
//   node provider.js PORT REDIRECT_URI ACCOUNTS_JSON CLIENT_ID CLIENT_SECRET
//
// ACCOUNTS_JSON maps a username to {password, sub, email, name, groups}; it is read again at
// each sign-in, so that a test may change someone's groups between two of them. The form
// has a Cancel button, which answers the site with `access_denied`.
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const [port, redirectUri, accountsFile, clientId, clientSecret] = process.argv.slice(2);
if (!port || !redirectUri || !accountsFile || !clientId || clientSecret === undefined) {
  console.error('usage: node provider.js PORT REDIRECT_URI ACCOUNTS_JSON CLIENT_ID CLIENT_SECRET');
  process.exit(2);
}
const modules = process.env.OIDC_PROVIDER_MODULES
  || path.resolve(__dirname, '../../.cache/npm/oidc-provider/node_modules');
const issuer = `http://127.0.0.1:${port}`;

function accounts() {
  return JSON.parse(fs.readFileSync(accountsFile, 'utf8'));
}

function accountBySub(sub) {
  return Object.entries(accounts()).find(([name, account]) => (account.sub || name) === sub);
}

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function form(uid, error) {
  return `<!doctype html><html><head><title>Test provider: sign in</title></head><body>
<h1>Test provider</h1>
${error ? `<p id="error">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}">
  <label>Username <input name="username" autocomplete="username"></label>
  <label>Password <input name="password" type="password"></label>
  <button type="submit" name="action" value="login">Sign in</button>
  <button type="submit" name="action" value="cancel">Cancel</button>
</form></body></html>`;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => resolve(new URLSearchParams(body)));
    req.on('error', reject);
  });
}

async function interaction(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  if (req.method === 'GET') {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(form(details.uid));
    return;
  }
  const body = await readBody(req);
  if (body.get('action') === 'cancel') {
    await provider.interactionFinished(req, res, {
      error: 'access_denied',
      error_description: 'the person cancelled the sign-in',
    }, { mergeWithLastSubmission: false });
    return;
  }
  const account = accounts()[body.get('username') || ''];
  if (!account || account.password !== body.get('password')) {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(form(details.uid, 'Wrong username or password.'));
    return;
  }
  const accountId = account.sub || body.get('username');
  await provider.interactionFinished(req, res, { login: { accountId } }, {
    mergeWithLastSubmission: false,
  });
}

async function main() {
  const { default: Provider } = await import(
    pathToFileURL(path.join(modules, 'oidc-provider/lib/index.js')).href
  );
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const key = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', alg: 'RS256', use: 'sig' };

  const provider = new Provider(issuer, {
    clients: [{
      client_id: clientId,
      client_secret: clientSecret || undefined,
      token_endpoint_auth_method: clientSecret ? 'client_secret_post' : 'none',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    }],
    jwks: { keys: [key] },
    cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
    pkce: { required: () => true },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (ctx, found) => `/interaction/${found.uid}` },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['preferred_username', 'name', 'given_name', 'family_name', 'groups'],
    },
    // The organisation's own client: whatever it asks for is granted, with no consent screen.
    async loadExistingGrant(ctx) {
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope([...ctx.oidc.requestParamScopes].join(' '));
      await grant.save();
      return grant;
    },
    async findAccount(ctx, sub) {
      const found = accountBySub(sub);
      if (!found) return undefined;
      const [username, account] = found;
      return {
        accountId: sub,
        async claims() {
          // Read again: the groups are those of the file as it is at this sign-in.
          const [, now] = accountBySub(sub) || found;
          return {
            sub,
            email: now.email,
            email_verified: true,
            preferred_username: now.preferred_username ?? username,
            name: now.name,
            given_name: now.given_name,
            family_name: now.family_name,
            groups: now.groups || [],
          };
        },
      };
    },
  });
  const handle = provider.callback();
  const server = http.createServer((req, res) => {
    if (req.url.startsWith('/interaction/')) {
      interaction(provider, req, res).catch((error) => {
        console.error(error);
        res.writeHead(500, { 'Content-Type': 'text/plain' });
        res.end(String(error));
      });
      return;
    }
    handle(req, res);
  });
  server.listen(Number(port), '127.0.0.1', () => console.log(`listening on ${issuer}`));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

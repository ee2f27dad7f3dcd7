// A real OpenID Provider for gitreg's sign-in tests: the certified `oidc-provider`
// package, configured for two test people and one client (gitreg).
//
//   node provider.mjs REDIRECT_URI[,REDIRECT_URI...] CLIENT_SECRET
//
// Listens on 127.0.0.1 on an ephemeral port and prints one JSON line,
// {"issuer": "http://127.0.0.1:PORT"}, once it accepts connections. The login
// form is oidc-provider's own development interaction (any password; the login
// name picks the account), followed by its consent form. Stopped by SIGTERM.
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';

import Provider from 'oidc-provider';

const [redirectUri, clientSecret] = process.argv.slice(2);
if (!redirectUri || !clientSecret) {
  console.error('usage: node provider.mjs REDIRECT_URI CLIENT_SECRET');
  process.exit(2);
}

const people = {
  alice: { email: 'alice@example.com', groups: ['platform-team'] },
  bob: { email: 'bob@example.com', groups: ['other'] },
  carol: { email: 'carol@example.com', groups: ['registry-admins'] },
};

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key-1', use: 'sig', alg: 'RS256' };

const configuration = {
  clients: [
    {
      client_id: 'gitreg',
      client_secret: clientSecret,
      redirect_uris: redirectUri.split(','),
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  jwks: { keys: [signingKey] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  // Put the scope's claims in the id_token itself, where gitreg reads them.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  cookies: { keys: ['gitreg-test-cookie-key-not-a-secret'] },
  features: { devInteractions: { enabled: true } },
  async findAccount(ctx, id) {
    const person = people[id];
    if (!person) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, name: id, email: person.email, email_verified: true, groups: person.groups };
      },
    };
  },
};

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, configuration);
  provider.on('server_error', (ctx, error) => console.error('server_error', error));
  server.on('request', provider.callback());
  console.log(JSON.stringify({ issuer }));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));

/**
 * Entry: read the configuration, finish a sign-in if the issuer just sent the browser back, then show
 * the dashboard (signed in, with who and a sign-out) or the sign-in button.
 */
import { createRoot } from 'react-dom/client';
import './main.css';
import { App, Page, Problem, SignIn } from './App.tsx';
import { createAppClient } from './apollo.ts';
import { loadConfig, type WebConfig } from './config.ts';
import { beginSignIn, completeSignIn, userOf } from './sign-in.ts';

const root = createRoot(document.getElementById('root')!);

function showSignIn(config: WebConfig, signedOut = false): void {
  root.render(
    <Page>
      <SignIn signedOut={signedOut} onSignIn={() => void beginSignIn(config).catch(showProblem)} />
    </Page>,
  );
}

async function start(): Promise<void> {
  const config = await loadConfig();
  const session = await completeSignIn(config);
  if (session === undefined) {
    showSignIn(config);
    return;
  }
  const app = createAppClient(config.graphqlUrl, session);
  // Signing out forgets the token (it was in memory only), the cache and the live connection.
  const signOut = (): void => {
    void app.client.clearStore().finally(() => void app.dispose());
    showSignIn(config, true);
  };
  root.render(
    <Page user={userOf(session)} onSignOut={signOut}>
      <App client={app.client} graphqlUrl={config.graphqlUrl} />
    </Page>,
  );
}

function showProblem(error: unknown): void {
  root.render(
    <Page>
      <Problem message={error instanceof Error ? error.message : String(error)} />
    </Page>,
  );
}

start().catch(showProblem);

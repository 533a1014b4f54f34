/**
 * Entry: read the configuration, finish a sign-in if the issuer just sent the browser back, then show
 * the dashboard (signed in) or the sign-in button.
 */
import { createRoot } from 'react-dom/client';
import './main.css';
import { App, SignIn, Problem } from './App.tsx';
import { createAppClient } from './apollo.ts';
import { loadConfig } from './config.ts';
import { beginSignIn, completeSignIn } from './sign-in.ts';

async function start(root: ReturnType<typeof createRoot>): Promise<void> {
  const config = await loadConfig();
  const session = await completeSignIn(config);
  if (session === undefined) {
    root.render(<SignIn onSignIn={() => void beginSignIn(config).catch(showProblem)} />);
    return;
  }
  const { client } = createAppClient(config.graphqlUrl, session);
  root.render(<App client={client} />);
}

const root = createRoot(document.getElementById('root')!);

function showProblem(error: unknown): void {
  root.render(<Problem message={error instanceof Error ? error.message : String(error)} />);
}

start(root).catch(showProblem);

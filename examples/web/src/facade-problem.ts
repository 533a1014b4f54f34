/**
 * What a request to the facade that never got an answer means. The browser says only "Failed to
 * fetch" both when the facade is down and when it refused this page's origin (CORS): the answer is
 * withheld from the page either way. A `no-cors` request tells them apart: it is answered (opaquely)
 * whenever the facade is up, whatever it allows.
 */

export async function explainUnanswered(graphqlUrl: string): Promise<string> {
  const facade = new URL(graphqlUrl).origin;
  const page = window.location.origin;
  try {
    await fetch(graphqlUrl, { mode: 'no-cors', cache: 'no-store', credentials: 'omit' });
  } catch {
    return `The facade at ${facade} cannot be reached. Is it running (npm start)?`;
  }
  return (
    `The facade at ${facade} refuses this page's origin, ${page}: its CORS_ORIGINS does not list it. ` +
    `Start the facade with CORS_ORIGINS=${page} (a comma-separated list), or open this app at an origin it lists.`
  );
}

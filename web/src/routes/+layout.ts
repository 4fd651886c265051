// The dashboard renders in the browser: every page reads the gateway's /api with the session cookie.
export const ssr = false;
export const prerender = false;

import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { GatewayDeps } from '@portcullis/gateway';

/** Where `npm run build:web` leaves the dashboard's adapter-node build (`WEB_BUILD_DIR` under web/, default `build`). */
export function dashboardBuild(dir = 'build'): string {
  return fileURLToPath(new URL(`../../../web/${dir}/handler.js`, import.meta.url));
}

/**
 * The built dashboard's request handler, or undefined when it has not been built (the gateway
 * then serves a landing page). `npm start` builds it first (`scripts/build-web.mjs`).
 */
export async function loadDashboard(buildDir?: string): Promise<GatewayDeps['dashboard']> {
  const built = dashboardBuild(buildDir);
  if (!existsSync(built)) return undefined;
  const module = (await import(pathToFileURL(built).href)) as { handler: NonNullable<GatewayDeps['dashboard']> };
  return module.handler;
}

import adapter from '@sveltejs/adapter-node';
import { vitePreprocess } from '@sveltejs/vite-plugin-svelte';

/** The dashboard: a client-rendered SvelteKit app that talks only to the gateway's `/api`. */
export default {
  preprocess: vitePreprocess(),
  kit: {
    // WEB_BUILD_DIR / WEB_KIT_DIR let several builds live side by side (parallel work); default build/.
    adapter: adapter({ out: process.env.WEB_BUILD_DIR ?? 'build' }),
    outDir: process.env.WEB_KIT_DIR ?? '.svelte-kit',
  },
};

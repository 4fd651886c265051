import { sveltekit } from '@sveltejs/kit/vite';
import { defineConfig } from 'vite';

export default defineConfig({
  plugins: [sveltekit()],
  // The bundler's plugin-timing report is noise in every test run.
  build: { rolldownOptions: { checks: { pluginTimings: false } } },
  // `vite dev`: the gateway answers /api (run `npm start` beside it).
  server: { proxy: { '/api': 'http://127.0.0.1:8080' } },
});

import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './services/core/src/db/schema/*.ts',
  out: './services/core/src/db/migrations',
});

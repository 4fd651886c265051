export { listEntities, startSandbox, type Sandbox, type SandboxApp, type SandboxOptions } from './sandbox.ts';
export { ACTIVITY_COLLECTION, type CallerIdentity, type ToolResultBody } from './tools/tool-executor.ts';
export type { ToolOperation } from './tools/tool-plan.ts';
export type { SandboxEntity } from './store/seed-data.ts';
export { loadSandboxConfig, sandboxConfigShape, type SandboxConfig } from './config.ts';

export { startStandalone, type Standalone } from './standalone.ts';
export {
  DEMO_AGENT_NAME, DEMO_CONNECTED_SERVICES, DEMO_DENY_MESSAGE, DEMO_ENABLED_SERVICES, DEMO_OWNER_EMAIL, DEMO_POLICY_KEY,
  seedDemo, type DemoSeed, type IssueUpstreamToken, type PolicyRecordForCedar, type RegisterOAuthApp,
} from './demo-seed.ts';

export { loadGatewayConfig, type GatewayConfig } from './config.ts';
export { startGateway, type Gateway } from './gateway.ts';
export { POLICY_UNAVAILABLE } from './mcp/tool-call-service.ts';

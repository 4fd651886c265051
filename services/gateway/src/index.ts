export { GATEWAY_CONFIG_VARIABLES, loadGatewayConfig, type GatewayConfig } from './config.ts';
export { composeGateway, startGateway, type Gateway, type GatewayDeps } from './gateway.ts';
export { POLICY_UNAVAILABLE } from './mcp/tool-call-service.ts';
export { CLIENT_SECRET_LABEL } from './modules/connectors/credentials-service.ts';
export { openApiDocument } from './openapi-document.ts';

export { AUDIT_CONFIG_VARIABLES, loadAuditConfig, type AuditConfig } from './config.ts';
export { startAuditService, type AuditService } from './server.ts';
export type { AuditMember, AuditPage, AuditStats, AuditStore } from './store/audit-store.ts';
export type { AuditFilter } from './store/audit-filter.ts';

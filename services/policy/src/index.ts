export { POLICY_CONFIG_VARIABLES, loadPolicyConfig, type PolicyConfig } from './config.ts';
export { startPolicyService, type PolicyService } from './policy-service.ts';
export {
  BASE_POLICY_KEY, compilePolicy, compilePolicyText, MEMBER_NOT_APPROVED_POLICY_KEY, PolicyCompileError, RESERVED_KEY_PREFIX,
  type CompileMode, type PolicyCompilation, type PolicyRecordInput,
} from './engine/compile.ts';
export { compilePreview, policyDraftSchema, type PolicyDraft, type PolicyPreview } from './engine/preview.ts';

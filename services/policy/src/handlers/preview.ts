import type * as grpc from '@grpc/grpc-js';
import { compilePreview } from '../engine/preview.ts';
import { PolicyServiceError } from '../errors.ts';
import { toGrpcError } from './grpc-status.ts';

/** `PreviewRequest` as proto-loader delivers it. */
export interface PreviewRequest {
  agentId: string;
  draftJson: string;
}

/** `PreviewResponse`: the draft's Cedar, or why it cannot be compiled. */
export interface PreviewResponse {
  cedar: string;
  errors: string[];
  warnings: string[];
}

/**
 * `Preview`: compiles a draft to Cedar without saving it. Problems with the draft itself
 * are answered in `errors`; only a body that is not JSON at all is INVALID_ARGUMENT.
 */
export function createPreviewHandler(): grpc.handleUnaryCall<PreviewRequest, PreviewResponse> {
  return (call, callback) => {
    let draft: unknown;
    try {
      draft = JSON.parse(call.request.draftJson);
    } catch {
      return callback(toGrpcError(new PolicyServiceError('invalid_request', 'draft_json is not valid JSON')));
    }
    try {
      return callback(null, compilePreview(draft));
    } catch (err) {
      return callback(toGrpcError(err));
    }
  };
}

import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { cedarNamespace, connectors, getConnector, resourceTypesOf } from '@portcullis/core';

/**
 * The Cedar schema, generated from the catalog: `Portcullis::Member` (role, status, email;
 * parent `Portcullis::Agent`), the context's tag-carrying entities, and per connector a
 * namespace `<Label>MCP` with `Service`, its resource types and one action per tool, every
 * action taking the same context (`Portcullis::CallContext`).
 */

/** Cedar's JSON schema format, as plain data (the package's own types are stricter than needed here). */
type JsonSchemaValue = Record<string, unknown>;

const tagged = (tags: JsonSchemaValue): JsonSchemaValue => ({ tags });

const PORTCULLIS_NAMESPACE: JsonSchemaValue = {
  entityTypes: {
    Agent: {},
    Member: {
      memberOfTypes: ['Agent'],
      shape: { type: 'Record', attributes: { role: { type: 'String' }, status: { type: 'String' }, email: { type: 'String' } } },
    },
    /** Tag per IANA zone: local weekday (0 = Sunday) and minute of the day. */
    Clock: tagged({ type: 'Record', attributes: { day: { type: 'Long' }, minute: { type: 'Long' } } }),
    /** Tag per argument path: the value's kind and canonical text. */
    Arguments: tagged({ type: 'Record', attributes: { kind: { type: 'String' }, text: { type: 'String' } } }),
    /** Tag per regex rule: whether the argument matched. */
    Matches: tagged({ type: 'Boolean' }),
    /** Tag per session-limited policy key: allowed calls of its tools so far in the session. */
    Session: tagged({ type: 'Long' }),
  },
  actions: {},
  commonTypes: {
    CallContext: {
      type: 'Record',
      attributes: {
        tier: { type: 'String' },
        now: { type: 'Long' },
        hour: { type: 'Long' },
        dayOfWeek: { type: 'Long' },
        clock: { type: 'Entity', name: 'Portcullis::Clock' },
        args: { type: 'Entity', name: 'Portcullis::Arguments' },
        matches: { type: 'Entity', name: 'Portcullis::Matches' },
        session: { type: 'Entity', name: 'Portcullis::Session' },
      },
    },
  },
};

function connectorNamespace(service: string): JsonSchemaValue {
  const connector = getConnector(service)!;
  const ns = cedarNamespace(service);
  const resourceTypes = ['Service', ...resourceTypesOf(service).map((t) => t.slice(ns.length + 2)).filter((t) => t !== 'Service')];
  return {
    entityTypes: Object.fromEntries(resourceTypes.map((t) => [t, {}])),
    actions: Object.fromEntries(connector.tools.map((tool) => [tool.name, {
      appliesTo: { principalTypes: ['Portcullis::Member'], resourceTypes, context: { type: 'Portcullis::CallContext' } },
    }])),
  };
}

const bySchemaKey = new Map<string, cedar.SchemaJson<string>>();

/**
 * The schema for policies of `service` (the Portcullis namespace plus that connector's), or of
 * the whole catalog without a service. Authoring validates each policy against its own
 * service's slice: the same types, and a fraction of the validator's work.
 */
export function cedarSchema(service?: string): cedar.SchemaJson<string> {
  const key = service ?? '*';
  let schema = bySchemaKey.get(key);
  if (!schema) {
    const services = service === undefined ? connectors.map((c) => c.key) : [service];
    schema = { Portcullis: PORTCULLIS_NAMESPACE, ...Object.fromEntries(services.map((s) => [cedarNamespace(s), connectorNamespace(s)])) } as unknown as cedar.SchemaJson<string>;
    bySchemaKey.set(key, schema);
  }
  return schema;
}

/** Strict validation of one policy of `service` against the catalog's schema. */
export function validatePolicyStrict(service: string, policyKey: string, policyText: string): { errors: string[]; warnings: string[] } {
  const answer = cedar.validate({
    schema: cedarSchema(service),
    policies: { staticPolicies: { [policyKey]: policyText } },
    validationSettings: { mode: 'strict' },
  });
  if (answer.type === 'failure') return { errors: answer.errors.map((e) => `cedar: ${e.message}`), warnings: [] };
  return {
    errors: answer.validationErrors.map((e) => `cedar: ${detail(e.error)}`),
    warnings: answer.validationWarnings.map((e) => `cedar: ${detail(e.error)}`),
  };
}

function detail(error: cedar.DetailedError): string {
  return error.help ? `${error.message} (${error.help})` : error.message;
}

CREATE TABLE "call_approval_mail" (
	"agent_id" uuid PRIMARY KEY NOT NULL,
	"last_sent_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "call_approvals" (
	"id" uuid PRIMARY KEY NOT NULL,
	"agent_id" uuid NOT NULL,
	"member_id" uuid NOT NULL,
	"member_email" text NOT NULL,
	"member_key_id" text NOT NULL,
	"service" text NOT NULL,
	"tool" text NOT NULL,
	"tool_args" jsonb NOT NULL,
	"args_digest" text NOT NULL,
	"policy_id" uuid NOT NULL,
	"policy_key" text NOT NULL,
	"policy_name" text NOT NULL,
	"policy_version_id" text NOT NULL,
	"binding_versions" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"reason" text,
	"approver_id" uuid,
	"approver_email" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"decided_at" timestamp with time zone,
	"executed_at" timestamp with time zone,
	"expiry_reported_at" timestamp with time zone,
	"audit_entry_ids" jsonb DEFAULT '[]'::jsonb NOT NULL,
	CONSTRAINT "call_approvals_status" CHECK ("call_approvals"."status" in ('pending', 'approved', 'denied', 'expired', 'executed'))
);
--> statement-breakpoint
ALTER TABLE "call_approval_mail" ADD CONSTRAINT "call_approval_mail_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "call_approvals" ADD CONSTRAINT "call_approvals_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "call_approvals" ADD CONSTRAINT "call_approvals_member_id_members_id_fk" FOREIGN KEY ("member_id") REFERENCES "public"."members"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "call_approvals" ADD CONSTRAINT "call_approvals_approver_id_users_id_fk" FOREIGN KEY ("approver_id") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "call_approvals_binding_idx" ON "call_approvals" USING btree ("agent_id","member_id","service","tool","args_digest","created_at");--> statement-breakpoint
CREATE INDEX "call_approvals_agent_idx" ON "call_approvals" USING btree ("agent_id","created_at");--> statement-breakpoint
CREATE INDEX "call_approvals_open_idx" ON "call_approvals" USING btree ("status","expires_at");--> statement-breakpoint
CREATE UNIQUE INDEX "call_approvals_one_pending_uq" ON "call_approvals" USING btree ("agent_id","member_id","service","tool","args_digest","binding_versions") WHERE "call_approvals"."status" = 'pending';
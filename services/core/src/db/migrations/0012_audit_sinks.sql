CREATE TABLE "audit_sinks" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"agent_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"name" text NOT NULL,
	"url" text NOT NULL,
	"secret_sealed" text,
	"headers_sealed" text,
	"enabled" boolean DEFAULT true NOT NULL,
	"last_error" text,
	"last_error_at" timestamp with time zone,
	"last_delivered_at" timestamp with time zone,
	"created_by" uuid,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "audit_sinks_kind" CHECK ("audit_sinks"."kind" in ('webhook', 'otlp')),
	CONSTRAINT "audit_sinks_webhook_secret" CHECK ("audit_sinks"."kind" <> 'webhook' or "audit_sinks"."secret_sealed" is not null)
);
--> statement-breakpoint
ALTER TABLE "audit_sinks" ADD CONSTRAINT "audit_sinks_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "audit_sinks" ADD CONSTRAINT "audit_sinks_created_by_users_id_fk" FOREIGN KEY ("created_by") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "audit_sinks_agent_idx" ON "audit_sinks" USING btree ("agent_id");
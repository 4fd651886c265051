CREATE TABLE "call_approval_reveals" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"approval_id" uuid NOT NULL,
	"user_id" uuid,
	"user_email" text NOT NULL,
	"revealed_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "mcp_oauth_consent_uses" (
	"request_digest" text PRIMARY KEY NOT NULL,
	"used_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "call_approvals" ADD COLUMN "sealed_args" text;--> statement-breakpoint
ALTER TABLE "call_approval_reveals" ADD CONSTRAINT "call_approval_reveals_approval_id_call_approvals_id_fk" FOREIGN KEY ("approval_id") REFERENCES "public"."call_approvals"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "call_approval_reveals" ADD CONSTRAINT "call_approval_reveals_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "call_approval_reveals_approval_idx" ON "call_approval_reveals" USING btree ("approval_id","revealed_at");
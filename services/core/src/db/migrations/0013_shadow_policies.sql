ALTER TABLE "policies" ADD COLUMN "mode" text DEFAULT 'enforce' NOT NULL;--> statement-breakpoint
ALTER TABLE "policies" ADD COLUMN "shadow_since" timestamp with time zone;
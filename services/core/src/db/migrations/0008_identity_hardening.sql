CREATE TABLE "rate_limit_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"action" text NOT NULL,
	"subject" text NOT NULL,
	"occurred_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "connector_credentials" ALTER COLUMN "client_id" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "connector_credentials" ALTER COLUMN "client_secret_sealed" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "sign_in_codes" ADD COLUMN "browser_binding_hash" text;--> statement-breakpoint
CREATE INDEX "rate_limit_events_subject_idx" ON "rate_limit_events" USING btree ("action","subject","occurred_at");--> statement-breakpoint
CREATE INDEX "rate_limit_events_age_idx" ON "rate_limit_events" USING btree ("action","occurred_at");--> statement-breakpoint
ALTER TABLE "connector_credentials" ADD CONSTRAINT "connector_credentials_client_pair" CHECK (("connector_credentials"."client_id" is null) = ("connector_credentials"."client_secret_sealed" is null));--> statement-breakpoint
ALTER TABLE "connector_credentials" ADD CONSTRAINT "connector_credentials_not_empty" CHECK ("connector_credentials"."client_id" is not null or "connector_credentials"."webhook_secret_sealed" is not null);
CREATE TABLE "deleted_agent_owners" (
	"agent_id" uuid NOT NULL,
	"user_id" uuid NOT NULL,
	"agent_name" text NOT NULL,
	"deleted_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "deleted_agent_owners_agent_id_user_id_pk" PRIMARY KEY("agent_id","user_id")
);
--> statement-breakpoint
ALTER TABLE "deleted_agent_owners" ADD CONSTRAINT "deleted_agent_owners_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "deleted_agent_owners_user_idx" ON "deleted_agent_owners" USING btree ("user_id");
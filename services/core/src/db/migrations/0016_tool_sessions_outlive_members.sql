ALTER TABLE "tool_sessions" DROP CONSTRAINT "tool_sessions_member_id_members_id_fk";
--> statement-breakpoint
ALTER TABLE "tool_sessions" DROP CONSTRAINT "tool_sessions_key_id_member_keys_id_fk";
--> statement-breakpoint
ALTER TABLE "tool_sessions" ADD COLUMN "member_email" text;
-- The model options a turn was sent with (temperature, max_tokens, …), as a JSON object; NULL
-- when none were given. Numbered 0008 while other numbers are written on other branches: the
-- migrator applies any number that is not recorded yet.
ALTER TABLE turn ADD COLUMN model_options TEXT;

-- Push opIds of up to 100 characters, whatever they are.
--
-- op_key is the opId lower-cased (opIds compare case-insensitively). Full lower-casing can
-- lengthen a string: U+0130 `İ` becomes `i̇` (two code points), the only such mapping, so a
-- 100-character opId has a key of up to 200 code points. At VARCHAR(100) a push with 51 or more
-- `İ` failed with 500 for the whole batch, forever (the same key is recomputed on every retry).
-- Stored keys keep their value: nothing about existing rows changes.

ALTER TABLE sync_operations
    MODIFY op_key VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;

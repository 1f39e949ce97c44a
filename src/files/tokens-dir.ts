// The `--tokens DIR` source for gym-observed: `DIR/<rollout_id>.tokens.jsonl`, one entry a line.
// Only files inside DIR are read: a token file that is a symlink resolving outside DIR's real
// path is refused (a link in DIR must not hand out /etc/passwd or another user's captures).
import { closeSync, fstatSync, openSync, readFileSync, realpathSync, constants } from "node:fs";
import { join, sep } from "node:path";
import type { TokenEntries, TokenSource } from "../formats/types.js";
import { FormatError } from "../formats/values.js";
import { reasonOf } from "./file-error.js";
import { TOKEN_FILE_SUFFIX, tokenEntries } from "../formats/token-files.js";

export function tokenDirectory(dir: string): TokenSource {
  const pathOf = (rolloutId: string) => join(dir, `${rolloutId}${TOKEN_FILE_SUFFIX}`);
  let root: string | undefined; // DIR's real path with a trailing separator, resolved once
  const rootOf = (file: string): string => {
    if (root !== undefined) return root;
    try {
      const real = realpathSync(dir);
      root = real.endsWith(sep) ? real : real + sep;
      return root;
    } catch (error) {
      throw new FormatError("unreadable_token_file", `cannot read ${file}: ${dir}: ${reasonOf(error)}`);
    }
  };
  return {
    describe: pathOf,
    load(rolloutId: string): TokenEntries | null {
      // A rollout id is data from the input: it must not walk out of DIR.
      if (/[/\\\0]/.test(rolloutId) || rolloutId === "." || rolloutId === "..") {
        throw new FormatError("unsafe_rollout_id", `rollout id ${JSON.stringify(rolloutId)} cannot name a token file`);
      }
      const file = pathOf(rolloutId);
      let real: string;
      try {
        real = realpathSync(file);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
        throw new FormatError("unreadable_token_file", `cannot read ${file}: ${reasonOf(error)}`);
      }
      if (!real.startsWith(rootOf(file))) {
        throw new FormatError("token_file_outside_dir", `${file} is a symlink to ${real}, outside ${dir}`);
      }
      let bytes: Buffer;
      let fd: number;
      try {
        // The resolved path, not following a link swapped in since; non-blocking, so a named
        // pipe there does not hang the run before fstat refuses it.
        fd = openSync(real, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
        throw new FormatError("unreadable_token_file", `cannot read ${file}: ${reasonOf(error)}`);
      }
      try {
        // Only a regular file: a FIFO would block every rollout after it, /dev/zero never end.
        const stat = fstatSync(fd);
        if (!stat.isFile())
          throw new FormatError(
            "unreadable_token_file",
            `cannot read ${file}: ${stat.isDirectory() ? "is a directory" : "not a regular file"}`,
          );
        bytes = readFileSync(fd);
      } catch (error) {
        if (error instanceof FormatError) throw error;
        throw new FormatError("unreadable_token_file", `cannot read ${file}: ${reasonOf(error)}`);
      } finally {
        closeSync(fd);
      }
      return tokenEntries(file, bytes);
    },
  };
}

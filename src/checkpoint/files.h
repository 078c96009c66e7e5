// File-system steps of an atomic checkpoint save: synced writes, synced folders, the
// temporary-folder name and the final rename.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace cujax::checkpoint::files {

namespace fs = std::filesystem;

// Writes `bytes` to a new file and fsyncs it; throws Error naming the file and errno's text.
void write_synced(const fs::path& path, std::string_view bytes);
// Fsyncs a folder so the entries created in it survive a crash.
void sync_dir(const fs::path& dir);
// The whole file; throws Error naming it when it cannot be read.
std::string read(const fs::path& path);
// A fresh "<final>.orbax-checkpoint-tmp-<nanoseconds>-<n>" sibling of `final_path`.
fs::path tmp_sibling(const fs::path& final_path);
bool is_tmp(const fs::path& path);
// Makes the complete folder `tmp` appear as `final_path` in one step: a rename, or with
// `replace` an atomic exchange with the existing folder, whose old contents are then removed.
// Syncs the parent folder. Throws Error when `final_path` exists and `replace` is false.
void commit(const fs::path& tmp, const fs::path& final_path, bool replace);
// Nanoseconds since the epoch, as Orbax records timestamps.
int64_t now_nanos();

}  // namespace cujax::checkpoint::files

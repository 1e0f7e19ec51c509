#!/usr/bin/env bash
# Puts transformers' DeepSeek-V4.1 model files (src/transformers/models/deepseek_v41:
# __init__.py, configuration_deepseek_v41.py, modeling_deepseek_v41.py) into
# models/deepseek_v41/.hf_deepseek_v41/deepseek_v41/, for check_transformers.py on a
# transformers release that has no deepseek_v41 (5.17, on the GPU machine, which has
# no network). The folder is git-ignored: upstream code is never committed here.
# .hf_deepseek_v41/UPSTREAM records the commit, where the files came from and their
# sha256. The GPU run must carry the folder (run's `carry`:
# models/deepseek_v41/.hf_deepseek_v41).
#
# Usage:
#   vendor_transformers.sh [--git-dir DIR] [--rev REV]
#       from a transformers git directory (bare or a clone's .git; default the
#       search tool's mirror, /work/.mirror/huggingface+transformers), at REV
#       (default the commit check_transformers.py was written against, below)
#   vendor_transformers.sh --from DIR [--rev COMMIT]
#       from a folder holding the three files as read from transformers at COMMIT
#       (when no git directory can be had: the mirror of transformers is over the
#       fetch tool's size limit); DIR/SOURCE, if present, is copied into UPSTREAM
#
# Only the modeling and configuration files and the package __init__ are taken:
# the modular file is not imported, and the image/processor files need a vision
# stack the text model does not use.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=$here/.hf_deepseek_v41
# The commit whose modeling_deepseek_v41.py reference.py / check_transformers.py
# were checked against (2026 snapshot of huggingface/transformers main).
rev=0a2080b43eb64e6d448186a4f3f0bc9c618f4797
git_dir=
from=
files=(__init__.py configuration_deepseek_v41.py modeling_deepseek_v41.py)
upstream_path=src/transformers/models/deepseek_v41

die() { echo "vendor_transformers: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --git-dir) git_dir=${2:?--git-dir needs a directory}; shift 2 ;;
    --rev) rev=${2:?--rev needs a commit}; shift 2 ;;
    --from) from=${2:?--from needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ -z $git_dir || -z $from ]] || die "give --git-dir or --from, not both"

tmp=$(mktemp -d "$here/.hf_deepseek_v41.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
mkdir -p "$tmp/deepseek_v41"
if [[ -n $from ]]; then
  [[ $rev =~ ^[0-9a-f]{40}$ ]] || die "--from needs --rev with the 40-hex commit the files were read at"
  for f in "${files[@]}"; do
    [[ -s $from/$f ]] || die "$from/$f is missing or empty"
    cp "$from/$f" "$tmp/deepseek_v41/$f"
  done
  commit=$rev
  source="files in $from, as read from huggingface/transformers"
else
  if [[ -z $git_dir ]]; then
    for d in /work/.mirror/huggingface+transformers/repo/.git /work/.mirror/huggingface+transformers/repo; do
      [[ -d $d/objects ]] && { git_dir=$d; break; }
    done
    [[ -n $git_dir ]] || die "no transformers git directory under /work/.mirror (fetch github:huggingface/transformers, or give --git-dir / --from)"
  fi
  commit=$(git --git-dir="$git_dir" rev-parse --verify --quiet "$rev^{commit}") ||
    die "$git_dir has no commit $rev"
  for f in "${files[@]}"; do
    git --git-dir="$git_dir" show "$commit:$upstream_path/$f" >"$tmp/deepseek_v41/$f" 2>/dev/null ||
      die "$git_dir at $commit has no $upstream_path/$f"
  done
  source="git directory $git_dir"
fi

# The files must at least parse, and the modeling file must define the model.
for f in "${files[@]}"; do
  python3 -c 'import ast, sys; ast.parse(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1])' \
    "$tmp/deepseek_v41/$f" || die "$f does not parse as Python"
done
grep -q '^class DeepseekV41ForCausalLM' "$tmp/deepseek_v41/modeling_deepseek_v41.py" ||
  die "modeling_deepseek_v41.py defines no DeepseekV41ForCausalLM"

{
  echo "commit $commit"
  echo "path $upstream_path"
  echo "source $source"
  [[ -n $from && -f $from/SOURCE ]] && sed 's/^/note /' "$from/SOURCE"
  (cd "$tmp" && sha256sum "${files[@]/#/deepseek_v41/}")
} >"$tmp/UPSTREAM"

rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "vendor_transformers: $dest from $commit"
cat "$dest/UPSTREAM"

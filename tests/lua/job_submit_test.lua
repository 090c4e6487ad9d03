-- Unit test of etc/job_submit.lua under a stand-in of Slurm's `slurm` table (Slurm's
-- own job_submit/lua calls these functions with job_desc tables of the same fields).
-- Run: lua5.3 tests/lua/job_submit_test.lua etc/job_submit.lua TABLE
-- where TABLE is what `greenup site licenses SITE --lua TABLE` wrote for a site whose
-- node types give min_node_w = 45 and max_node_w = 160 (tests/cluster/greenup.yaml with
-- power.enforce: queue). Expected numbers are written out by hand below.
local script, table_path = arg[1], arg[2]
local said = {}
slurm = {
  SUCCESS = 0, ERROR = -1, NO_VAL = 0xfffffffe,
  log_info = function(...) end,
  log_error = function(fmt, ...) table.insert(said, "error: " .. string.format(fmt, ...)) end,
  log_user = function(fmt, ...) table.insert(said, string.format(fmt, ...)) end,
}
local src = assert(io.open(script)):read("a")
src = string.gsub(src, 'local TABLE = "[^"]*"', 'local TABLE = "' .. table_path .. '"')
assert(load(src, "job_submit.lua"))()

local failed = 0
local function check(what, got, want)
  if got ~= want then
    failed = failed + 1
    print(string.format("FAIL %s: got %s, want %s", what, tostring(got), tostring(want)))
  else
    print("ok   " .. what)
  end
end
local parts = { debug = { flag_default = 1 } }
local function submit(job)
  said = {}
  local rc = slurm_job_submit(job, parts, 1000)
  return rc, job.licenses
end

-- No request: the nodes' full power (2 x 160 W), on the site's and the partition's license.
check("two nodes, nothing asked", select(2, submit({ min_nodes = 2, partition = "debug" })),
  "greenup_w:320,greenup_w_debug:320")
-- The default partition when none is named.
check("default partition", select(2, submit({ min_nodes = 1 })), "greenup_w:160,greenup_w_debug:160")
-- A quote within the bounds is kept; other licenses are kept as written.
check("quote kept", select(2, submit({ min_nodes = 2, licenses = "matlab:1,greenup_w:200" })),
  "matlab:1,greenup_w:200,greenup_w_debug:200")
-- Asking too little is raised to the lowest clock's power (2 x 45 W), too much lowered.
check("too little raised", select(2, submit({ min_nodes = 2, licenses = "greenup_w:1" })),
  "greenup_w:90,greenup_w_debug:90")
check("raised and said so", said[1] ~= nil and string.find(said[1], "held 90 W", 1, true) ~= nil, true)
check("too much lowered", select(2, submit({ min_nodes = 1, licenses = "greenup_w_debug*9999" })),
  "greenup_w:160,greenup_w_debug:160")
-- Unset node counts are NO_VAL: then the maximum, else one node.
check("max nodes when no min", select(2, submit({ min_nodes = slurm.NO_VAL, max_nodes = 3 })),
  "greenup_w:480,greenup_w_debug:480")
check("one node when none", select(2, submit({ min_nodes = slurm.NO_VAL, max_nodes = slurm.NO_VAL })),
  "greenup_w:160,greenup_w_debug:160")
-- A partition greenup does not know holds the site's license only.
check("unknown partition", select(2, submit({ min_nodes = 1, partition = "other" })), "greenup_w:160")
-- OR-ed licenses cannot be combined: refused with a message.
check("'|' refused", (submit({ min_nodes = 1, licenses = "a:1|b:1" })), slurm.ERROR)

-- Changes after submission: only an operator may change greenup's licenses.
local rec = { licenses = "greenup_w:160,greenup_w_debug:160" }
check("owner drops them", slurm_job_modify({ licenses = "" }, rec, parts, 1000), slurm.ERROR)
check("owner changes them", slurm_job_modify({ licenses = "greenup_w:1,greenup_w_debug:1" }, rec, parts, 1000), slurm.ERROR)
check("owner changes other licenses", slurm_job_modify({ licenses = "matlab:2,greenup_w:160,greenup_w_debug:160" }, rec, parts, 1000), slurm.SUCCESS)
check("root changes them", slurm_job_modify({ licenses = "greenup_w:100,greenup_w_debug:100" }, rec, parts, 0), slurm.SUCCESS)
check("other changes pass", slurm_job_modify({ name = "x" }, rec, parts, 1000), slurm.SUCCESS)

if failed > 0 then print(failed .. " failed"); os.exit(1) end
print("all passed")

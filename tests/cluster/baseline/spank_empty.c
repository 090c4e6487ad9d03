/* The overhead benchmark's baseline: a SPANK plugin that hooks the same callbacks as
 * greenup's (job prolog and epilog, step start and end) and does nothing in them. Slurm
 * pays for running any such plugin (slurmd starts `slurmstepd spank prolog` and
 * `... epilog` on every node); the difference between this plugin and greenup's is
 * what greenup's own work adds. Built by tests/cluster/bench.sh, never installed. */
#include <slurm/spank.h>

SPANK_PLUGIN(greenup_baseline, 1);

int slurm_spank_init(spank_t sp, int ac, char **av) { return 0; }
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) { return 0; }
int slurm_spank_job_prolog(spank_t sp, int ac, char **av) { return 0; }
int slurm_spank_job_epilog(spank_t sp, int ac, char **av) { return 0; }
int slurm_spank_exit(spank_t sp, int ac, char **av) { return 0; }

package hooksql

const workerEnv = "HOOKRELAY_SQL_TEST_WORKER"

func runWorkerProcess() int { return 0 }

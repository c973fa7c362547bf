// A command agent on the JVM (run as a single source file: `java JvmAgent.java`): reads its task, calls the first
// tool it was given, and finishes saying how much heap the JVM may use, so a test sees the JVM started and worked.
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class JvmAgent {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String task = in.readLine();
        String marker = "\"tools\": [{\"name\": \"";  // the task line as the worker writes it (json.dumps)
        int at = task.indexOf(marker) + marker.length();
        String tool = task.substring(at, task.indexOf('"', at));
        System.out.println("{\"tool\": \"" + tool + "\", \"args\": {}}");
        System.out.flush();
        String observation = in.readLine();
        long heapMb = Runtime.getRuntime().maxMemory() >> 20;
        System.out.println("{\"finish\": true, \"summary\": \"the JVM called " + tool + " (" + observation.length()
            + " characters back); max heap " + heapMb + " MB\"}");
        System.out.flush();
    }
}
